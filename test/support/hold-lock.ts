/**
 * A separate client process for tests: acquires a lock, prints `acquired <token>`, and holds
 * it until it is killed. Run as `node --import tsx test/support/hold-lock.ts <address> <name> [acquire|session]`.
 */
import { LockCaller } from './lock-caller.js';

const [address, name, rpc = 'acquire'] = process.argv.slice(2);
if (!address || !name || (rpc !== 'acquire' && rpc !== 'session')) {
  throw new Error('usage: hold-lock.ts <address> <name> [acquire|session]');
}
const stream = new LockCaller(address, {}, undefined, rpc).open({ name, owner: `pid-${process.pid}` });
const token = await stream.acquired();
process.stdout.write(`acquired ${token}\n`);
setInterval(() => {}, 60_000);
