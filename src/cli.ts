#!/usr/bin/env node
import { Command } from 'commander';
import { pino } from 'pino';
import { addClientCommands } from './cli/client-commands.js';
import { addRunCommand } from './cli/run-command.js';
import { ConfigError, loadConfig, serveOptions } from './server/config.js';
import { startServer } from './server/main.js';

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
    const logger = pino({ level: config.logLevel, base: { service: 'lockstream' } });
    const server = await startServer(config, logger).catch((error: unknown) => {
      logger.fatal({ err: error }, 'could not start');
      logger.flush(() => process.exit(1));
      return undefined;
    });
    if (!server) return;
    let signals = 0;
    const onSignal = (name: string): void => {
      signals += 1;
      if (signals > 1) process.exit(130);
      logger.info({ signal: name }, 'received signal');
      void server.stop().then(() => {
        // Exit only once the last lines ("stopped") are written: stdout is written asynchronously.
        logger.flush(() => process.exit(0));
      });
    };
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
  });
for (const option of serveOptions(process.env)) serve.addOption(option);
addClientCommands(program, process.env);
addRunCommand(program, process.env);

await program.parseAsync(process.argv);
