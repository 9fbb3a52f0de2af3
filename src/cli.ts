#!/usr/bin/env node
/*
 * The `lockstream` command: `serve` runs a server (its logs, its exit code for a bad configuration,
 * its stop on SIGTERM or SIGINT), and the client, `run`, `leader` and `token` subcommands come from
 * src/cli.
 */
import { Command } from 'commander';
import { pino, type DestinationStream } from 'pino';
import { PinoPretty } from 'pino-pretty';
import { addClientCommands } from './cli/client-commands.js';
import { addRunCommand } from './cli/run-command.js';
import { addTokenCommand } from './cli/token-command.js';
import { ConfigError, loadConfig, serveOptions } from './server/config.js';
import { startServer } from './server/main.js';

// Node's HTTP/2 client sets the TLS server name to the target even when that is an IP address,
// then warns about it (nodejs/node#56189) on every `--server 10.0.0.5:50051 --tls` run; the
// certificate is still checked against the address. Only that warning is dropped.
const emitWarning = process.emitWarning.bind(process);
process.emitWarning = (warning: string | Error, ...rest: unknown[]) => {
  const code = typeof rest[0] === 'object' ? (rest[0] as { code?: string } | null)?.code : rest[1];
  if (code === 'DEP0123') return;
  (emitWarning as (...args: unknown[]) => void)(warning, ...rest);
};

const program = new Command('lockstream').description('lockstream: a distributed lock service over gRPC');

const serve = program
  .command('serve')
  .description('run a lock server (embedded store by default, ZooKeeper with --zookeeper)')
  .action(async () => {
    let config;
    try {
      config = loadConfig(process.env, process.argv.slice(process.argv.indexOf('serve') + 1));
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      console.error(`lockstream serve: ${error.message}`);
      process.exit(2);
    }
    // Synchronous stdout: a lock server logs little at its default level, and nothing may be lost on exit
    // (an asynchronous destination's flush() returns before a write already in flight has finished).
    const pretty = config.logFormat === 'pretty' || (config.logFormat === 'auto' && process.stdout.isTTY);
    const destination: DestinationStream = pretty
      ? PinoPretty({
          destination: 1,
          sync: true,
          colorize: process.stdout.isTTY,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname,service',
        })
      : pino.destination({ dest: 1, sync: true });
    const logger = pino({ level: config.logLevel, base: { service: 'lockstream' } }, destination);
    const server = await startServer(config, logger).catch((error: unknown) => {
      if (error instanceof ConfigError) {
        console.error(`lockstream serve: ${error.message}`);
        process.exit(2);
      }
      logger.fatal({ err: error }, 'could not start');
      process.exit(1);
    });
    let signals = 0;
    const onSignal = (name: string): void => {
      signals += 1;
      if (signals > 1) process.exit(130);
      logger.info({ signal: name }, 'received signal');
      void server.stop().then(() => process.exit(0));
    };
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
  });
for (const option of serveOptions(process.env)) serve.addOption(option);
addClientCommands(program, process.env);
addRunCommand(program, process.env);
addTokenCommand(program);

await program.parseAsync(process.argv);
