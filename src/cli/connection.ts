/*
 * How a client subcommand reaches the server: the `--server`, TLS and `--token-file` options, each
 * with its environment variable, and the LockClient made from them.
 */
import { readFileSync } from 'node:fs';
import { credentials } from '@grpc/grpc-js';
import { type Command, Option } from 'commander';
import { LockClient, LockClientError, type LockClientOptions } from '../client/index.js';

/** Where client subcommands find the server: `--server`, else LOCKSTREAM_SERVER, else the default. */
export const DEFAULT_SERVER = '127.0.0.1:50051';

/** How a client subcommand reaches and proves itself to the server. */
export interface ConnectionOptions {
  readonly server: string;
  readonly tls?: boolean;
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
  readonly tokenFile?: string;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Adds `--server`, the TLS options and `--token-file` to a client subcommand, each with its variable. */
export function addConnectionOptions(command: Command, env: Env): Command {
  const option = (flags: string, description: string, variable: string): Option => {
    const added = new Option(flags, `${description} (env: ${variable})`);
    const value = env[variable];
    return value === undefined || value === '' ? added : added.default(value);
  };
  return command
    .addOption(
      option(
        '--server <host:port,...>',
        'lockstream server to talk to; several instances of one back end, comma-separated, to fail over between',
        'LOCKSTREAM_SERVER',
      ).default(env['LOCKSTREAM_SERVER'] || DEFAULT_SERVER),
    )
    .addOption(
      new Option(
        '--tls',
        'use TLS, trusting the system CAs unless --ca is given (env: LOCKSTREAM_TLS=1)',
      ).default(env['LOCKSTREAM_TLS'] === '1' || env['LOCKSTREAM_TLS'] === 'true' ? true : undefined),
    )
    .addOption(
      option(
        '--ca <file>',
        "PEM CA certificates to trust for the server's certificate (implies --tls)",
        'LOCKSTREAM_CA',
      ),
    )
    .addOption(
      option(
        '--cert <file>',
        'PEM client certificate, for a server that requires one (mTLS)',
        'LOCKSTREAM_CERT',
      ),
    )
    .addOption(option('--key <file>', 'PEM private key of --cert', 'LOCKSTREAM_KEY'))
    .addOption(
      option(
        '--token-file <file>',
        'file holding the bearer token to send (or the token itself in LOCKSTREAM_TOKEN)',
        'LOCKSTREAM_TOKEN_FILE',
      ),
    );
}

/** A problem with the connection options, reported before anything is sent. */
export class ConnectionOptionsError extends Error {
  override readonly name = 'ConnectionOptionsError';
}

/** A LockClient for the connection options; throws ConnectionOptionsError for unreadable files. */
export function connect(options: ConnectionOptions, env: Env, extra: LockClientOptions = {}): LockClient {
  const read = (flag: string, path: string | undefined): Buffer | undefined => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      throw new ConnectionOptionsError(`${flag} ${JSON.stringify(path)}: cannot read it (${code})`);
    }
  };
  if ((options.cert === undefined) !== (options.key === undefined)) {
    throw new ConnectionOptionsError('--cert and --key: give both, or neither');
  }
  const ca = read('--ca', options.ca);
  const cert = read('--cert', options.cert);
  const key = read('--key', options.key);
  const useTls = options.tls === true || ca !== undefined || cert !== undefined;
  const fileToken = read('--token-file', options.tokenFile)?.toString('utf8').trim();
  const token = fileToken ?? (env['LOCKSTREAM_TOKEN'] || undefined);
  try {
    return new LockClient(serverEndpoints(options.server), {
      ...extra,
      ...(useTls ? { credentials: credentials.createSsl(ca ?? null, key ?? null, cert ?? null) } : {}),
      ...(token === undefined ? {} : { token }),
    });
  } catch (error) {
    if (!(error instanceof LockClientError)) throw error;
    throw new ConnectionOptionsError(`--server ${JSON.stringify(options.server)}: ${error.details}`);
  }
}

/** `--server`: one address (any gRPC target) as given, or comma-separated `host:port` endpoints. */
function serverEndpoints(server: string): string | string[] {
  return server.includes(',') ? server.split(',').map((endpoint) => endpoint.trim()) : server;
}
