/*
 * What every client subcommand shares: its exit codes, its duration arguments, and a client for
 * its connection options (withClient).
 */
import { parseDurationMs } from '../common/duration.js';
import { LockClientError, type LockClient } from '../client/index.js';
import { connect, ConnectionOptionsError, type ConnectionOptions } from './connection.js';

/** Exit codes of the client subcommands (see README: "The lockstream command"). */
export const EXIT = {
  ok: 0,
  /** `check`: the token is not held. */
  notHeld: 1,
  /** The server answered with an error, or could not be reached. */
  failed: 69,
  /** `run`: the lock was lost or revoked while the command ran; the command was stopped. */
  lockLost: 74,
  /** `run`: the lock was not acquired within `--wait`. */
  timedOut: 75,
  /** The connection options name a file that cannot be read, or are incomplete. */
  usage: 2,
} as const;

/** `ms`-style durations (`500ms`, `10s`) or plain milliseconds. */
export function durationArgument(flag: string): (value: string) => number {
  return (value) => {
    const parsed = parseDurationMs(value);
    if (parsed === undefined || parsed < 0) {
      throw new Error(`${flag} ${JSON.stringify(value)}: expected a duration such as 10s or 500ms`);
    }
    return Math.round(parsed);
  };
}

/** Runs `work` with a client for the connection options, printing a failure as `error: CODE: details`. */
export async function withClient(
  options: ConnectionOptions,
  env: Readonly<Record<string, string | undefined>>,
  work: (client: LockClient) => Promise<number>,
): Promise<number> {
  let client: LockClient;
  try {
    client = connect(options, env, { unavailableRetries: 0 });
  } catch (error) {
    if (!(error instanceof ConnectionOptionsError)) throw error;
    process.stderr.write(`error: ${error.message}\n`);
    return EXIT.usage;
  }
  try {
    return await work(client);
  } catch (error) {
    if (!(error instanceof LockClientError)) throw error;
    process.stderr.write(`error: ${error.message}\n`);
    return EXIT.failed;
  } finally {
    client.close();
  }
}
