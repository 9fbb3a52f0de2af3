/**
 * A separate lock-holding client process, driven line by line: `acquire <name>` prints
 * `acquired <name> <token>` once held, `release <name>` releases it, and when a hold ends
 * (released, or taken away) it prints `ended <name> <code>`. A test pauses it (SIGSTOP) to have a
 * holder that has not been told what the server did meanwhile. Run as
 * `node --import tsx test/support/holder-repl.ts <address>`.
 */
import { createInterface } from 'node:readline';
import { LockCaller, LockMode, type RequestStream } from './lock-caller.js';

const [address] = process.argv.slice(2);
if (!address) throw new Error('usage: holder-repl.ts <address>');
const locks = new LockCaller(address);
const held = new Map<string, RequestStream>();

for await (const line of createInterface({ input: process.stdin })) {
  const [command, name] = line.split(' ');
  if (!name) continue;
  if (command === 'acquire') {
    const stream = locks.open({ name, mode: LockMode.MUTEX, owner: `pid-${process.pid}` });
    held.set(name, stream);
    void stream.outcome.then(({ code }) => {
      held.delete(name);
      process.stdout.write(`ended ${name} ${code}\n`);
    });
    void stream.acquired().then(
      (token) => process.stdout.write(`acquired ${name} ${token}\n`),
      () => {},
    );
  } else if (command === 'release') {
    held.get(name)?.sendRelease();
  }
}
locks.close();
