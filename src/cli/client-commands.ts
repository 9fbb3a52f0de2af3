/*
 * The client subcommands that ask about locks and elections (`ls`, `describe`, `watch`,
 * `observe`, `check`, `revoke`), printing tables or JSON.
 */
import type { Command } from 'commander';
import { toJson } from '../common/json.js';
import { valueText } from '../common/value-text.js';
import { addConnectionOptions, type ConnectionOptions } from './connection.js';
import type { ElectionEvent, LockDescription, LockRequestInfo } from '../client/index.js';
import { durationArgument, EXIT, withClient } from './client-basics.js';

/** `ls`, `describe`, `check` and `revoke`: readable tables by default, JSON with `--json`. */
export function addClientCommands(program: Command, env: Readonly<Record<string, string | undefined>>): void {
  addConnectionOptions(program.command('ls'), env)
    .description('list locks that have holders or waiters')
    .argument('[prefix]', 'only names starting with this', '')
    .option('--json', 'print JSON lines, one per lock')
    .action(async (prefix: string, options: ConnectionOptions & { json?: boolean }) => {
      process.exitCode = await withClient(options, env, async (client) => {
        const rows: string[][] = [];
        let pageToken = '';
        do {
          const page = await client.list({ prefix, pageToken, pageSize: 1000 });
          for (const lock of page.locks) {
            if (options.json) process.stdout.write(`${JSON.stringify(lock)}\n`);
            else {
              // A semaphore's mode says how much of it is in use.
              const mode =
                lock.limit > 0 ? `semaphore ${lock.usedWeight}/${lock.limit}` : (lock.heldMode ?? '-');
              rows.push([lock.name, String(lock.holders), String(lock.waiters), mode]);
            }
          }
          pageToken = page.nextPageToken;
        } while (pageToken !== '');
        if (!options.json) process.stdout.write(table(['NAME', 'HOLDERS', 'WAITERS', 'MODE'], rows));
        return EXIT.ok;
      });
    });

  addConnectionOptions(program.command('describe'), env)
    .description('show who holds a lock and who waits for it, in queue order')
    .argument('<name>', 'the lock')
    .option('--json', 'print JSON')
    .action(async (name: string, options: ConnectionOptions & { json?: boolean }) => {
      process.exitCode = await withClient(options, env, async (client) => {
        const description = await client.describe(name);
        process.stdout.write(
          options.json ? `${toJson(descriptionJson(description))}\n` : describeText(description),
        );
        return EXIT.ok;
      });
    });

  addConnectionOptions(program.command('watch'), env)
    .description(
      "print a lock's holders and the values they publish, now and whenever they change, until interrupted",
    )
    .argument('<name>', 'the lock')
    .option('--json', 'print every state of the lock (holders and waiters) as a JSON line')
    .action(async (name: string, options: ConnectionOptions & { json?: boolean }) => {
      process.exitCode = await withClient(options, env, (client) =>
        untilInterrupted(async (signal) => {
          let last: string | undefined;
          for await (const state of client.watch(name, { signal })) {
            if (options.json) {
              process.stdout.write(`${toJson(descriptionJson(state))}\n`);
              continue;
            }
            const line = holdersLine(state);
            if (line !== last) process.stdout.write(`${new Date().toISOString()}  ${line}\n`);
            last = line;
          }
        }),
      );
    });

  addConnectionOptions(program.command('observe'), env)
    .description(
      "print an election's terms as they begin (term, leader's owner and value), the values its leaders proclaim, and when nobody leads, until interrupted",
    )
    .argument('<name>', 'the election')
    .option('--from-term <term>', 'first replay every term from this one on, out of the history')
    .option('--json', 'print every event as a JSON line')
    .action(async (name: string, options: ConnectionOptions & { json?: boolean; fromTerm?: string }) => {
      if (options.fromTerm !== undefined && !/^\d+$/.test(options.fromTerm))
        program.error(`observe: --from-term ${JSON.stringify(options.fromTerm)} is not a whole number`);
      process.exitCode = await withClient(options, env, (client) =>
        untilInterrupted(async (signal) => {
          const events = client.observe(name, {
            signal,
            ...(options.fromTerm === undefined ? {} : { fromTerm: BigInt(options.fromTerm) }),
          });
          for await (const event of events) {
            process.stdout.write(
              options.json
                ? `${toJson(electionEventJson(event))}\n`
                : `${new Date().toISOString()}  ${electionLine(name, event)}\n`,
            );
          }
        }),
      );
    });

  addConnectionOptions(program.command('check'), env)
    .description('say whether a fencing token is held for a lock now (exit 0: held, 1: not held)')
    .argument('<name>', 'the lock')
    .argument('<token>', 'the fencing token')
    .option('--json', 'print JSON')
    .action(async (name: string, token: string, options: ConnectionOptions & { json?: boolean }) => {
      if (!/^\d+$/.test(token)) program.error(`check: token ${JSON.stringify(token)} is not a whole number`);
      process.exitCode = await withClient(options, env, async (client) => {
        const held = await client.checkToken(name, BigInt(token));
        process.stdout.write(
          options.json ? `${JSON.stringify({ name, token, held })}\n` : `${held ? 'held' : 'not held'}\n`,
        );
        return held ? EXIT.ok : EXIT.notHeld;
      });
    });

  addConnectionOptions(program.command('revoke'), env)
    .description("ask a lock's holders to release it; with --force-after, take it away then")
    .argument('<name>', 'the lock')
    .option('--reason <text>', 'told to the holders', '')
    .option(
      '--force-after <duration>',
      'take the lock from holders that still hold it then',
      durationArgument('--force-after'),
    )
    .option('--json', 'print JSON')
    .action(
      async (
        name: string,
        options: ConnectionOptions & { reason: string; forceAfter?: number; json?: boolean },
      ) => {
        process.exitCode = await withClient(options, env, async (client) => {
          const asked = await client.revoke(name, { reason: options.reason, forceAfter: options.forceAfter });
          process.stdout.write(
            options.json
              ? `${JSON.stringify({ name, holdersAsked: asked })}\n`
              : `asked ${asked} holder${asked === 1 ? '' : 's'} of "${name}" to release it\n`,
          );
          return EXIT.ok;
        });
      },
    );
}

/** A description as JSON, values in base64 (as grpcurl prints bytes) and as text (see valueText). */
/**
 * Runs `follow` (a stream the command prints) until it ends or SIGINT or SIGTERM aborts its
 * signal; an interrupted stream is a normal end (exit 0), any other failure is thrown.
 */
async function untilInterrupted(follow: (signal: AbortSignal) => Promise<void>): Promise<number> {
  const interrupted = new AbortController();
  const stop = (): void => interrupted.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    await follow(interrupted.signal);
  } catch (error) {
    if (!interrupted.signal.aborted) throw error;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
  }
  return EXIT.ok;
}

function descriptionJson(description: LockDescription): unknown {
  const request = (info: LockRequestInfo): unknown => ({
    ...info,
    value: info.value.toString('base64'),
    valueText: valueText(info.value),
  });
  return {
    name: description.name,
    holders: description.holders.map(request),
    waiters: description.waiters.map(request),
    limit: description.limit,
    usedWeight: description.usedWeight,
  };
}

/** ` (3 of 5 in use)` for a semaphore; empty for a lock. */
function capacityText({ limit, usedWeight }: LockDescription): string {
  return limit > 0 ? ` (${usedWeight} of ${limit} in use)` : '';
}

/** `watch`: who holds the lock and what they publish, on one line. */
function holdersLine(description: LockDescription): string {
  if (description.holders.length === 0) {
    return `"${description.name}": no holder (${description.waiters.length} waiting)`;
  }
  const capacity = capacityText(description);
  const holders = description.holders.map((info) => {
    const value = valueText(info.value);
    return `${info.owner || '-'} (token ${info.token}${value === '' ? '' : `, value ${JSON.stringify(value)}`})`;
  });
  return `"${description.name}": held by ${holders.join(', ')}${capacity}`;
}

function describeText(description: LockDescription): string {
  const semaphore = description.limit > 0;
  const row = (info: LockRequestInfo, place: string): string[] => [
    place,
    // A semaphore request's mode carries its weight: semaphore×2.
    semaphore ? `semaphore×${info.weight}` : (info.mode ?? '?'),
    info.owner || '-',
    info.token.toString(),
    valueText(info.value) || '-',
    info.requestedAt?.toISOString() ?? '-',
    info.instance || '-',
    info.peer || '-',
  ];
  const header = ['', 'MODE', 'OWNER', 'TOKEN', 'VALUE', 'REQUESTED', 'INSTANCE', 'PEER'];
  const rows = [
    ...description.holders.map((info) => row(info, 'holds')),
    ...description.waiters.map((info, i) => row(info, `#${i + 1}`)),
  ];
  const kind = semaphore
    ? `a semaphore of limit ${description.limit}, ${description.usedWeight} in use; `
    : '';
  const summary = `lock ${JSON.stringify(description.name)}: ${kind}${description.holders.length} holding, ${description.waiters.length} waiting\n`;
  return rows.length === 0 ? summary : summary + table(header, rows);
}

/** Fixed-width columns, two spaces apart. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]?.length ?? 0)));
  const line = (cells: string[]): string =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

/** One observed election event as a line for people. */
function electionLine(name: string, event: ElectionEvent): string {
  const election = JSON.stringify(name);
  switch (event.kind) {
    case 'term':
      return `${election}: term ${event.term} led by ${event.owner || 'a candidate without owner'}, value ${JSON.stringify(valueText(event.value))}`;
    case 'proclaimed':
      return `${election}: term ${event.term} proclaimed value ${JSON.stringify(valueText(event.value))}`;
    case 'vacant':
      return event.afterTerm === 0n
        ? `${election}: nobody leads`
        : `${election}: nobody leads (term ${event.afterTerm} is over)`;
    case 'history-gone':
      return `${election}: the history begins at term ${event.firstTerm}; earlier terms are gone`;
    case 'skipped':
      return `${election}: fell behind; terms before ${event.firstTerm} left the history unseen`;
  }
}

/** One observed election event as JSON: values as base64 and, where they are text, as text. */
function electionEventJson(event: ElectionEvent): Record<string, unknown> {
  if (event.kind !== 'term' && event.kind !== 'proclaimed') return { ...event };
  return { ...event, value: event.value.toString('base64'), valueText: valueText(event.value) };
}
